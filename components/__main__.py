import sys

from .cli import main

sys.exit(main())  # the exit status survives tensorflow-io's teardown abort: see cloud_env._install_exit_guard
