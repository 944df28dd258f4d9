from .cli import main
from .core.cloud_env import exit_process

exit_process(main())  # not sys.exit: tensorflow-io aborts in interpreter teardown after s3 use
