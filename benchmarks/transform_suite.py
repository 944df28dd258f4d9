from .transform_bench import NAME, add_arguments, markdown, run  # noqa: F401
