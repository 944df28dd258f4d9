from .cli import console_main

console_main()  # the exit status survives tensorflow-io's teardown abort: see exit_guard.install_exit_guard
