from .cli import console_main

console_main()  # the exit status survives tensorflow-io's teardown abort: see cloud_env.install_exit_guard
