"""Which pass-through flags are Beam pipeline options, known without importing Beam (~6 s).

A flag neither shardflow nor Beam knows is a typo: Beam would only warn and the run would go on
with the default. The names below are every option Beam `BEAM_VERSION` registers (all
`PipelineOptions` subclasses, Dataflow's and Dask's included); tests/pipeline/test_cli_refusals.py compares
them with `registered_option_names()`, so a Beam upgrade that adds options fails until this
list is regenerated from that function.

>>> unknown_flags(["--runner", "DaskRunner", "--direct_num_workers=2", "--resise", "16x16"])
['--resise']
>>> unknown_flags(["--project=p", "--region", "r", "--temp_location", "gs://b/t", "--dask_client_address=h:1"])
[]
"""
from __future__ import annotations

import difflib
from typing import Iterable

BEAM_VERSION = "2.72.0"
_NAMES = """
    allow_non_deterministic_key_coders allow_unsafe_triggers artifact_endpoint artifact_port artifacts_dir
    auto_unique_labels autoscaling_algorithm azure_connection_string azure_managed_identity_client_id
    beam_plugin beam_plugins beam_services blob_service_endpoint cloud_build_machine_type
    create_from_snapshot dask_client_address dask_client_name dask_connection_limit dask_connection_timeout
    dask_npartitions dask_partition_size dask_scheduler_file dataflow_endpoint dataflow_job_file
    dataflow_kms_key dataflow_service_option dataflow_service_options default_sdk_harness_log_level
    direct_embed_docker_python direct_num_workers direct_runner_bundle_repeat direct_running_mode
    direct_test_splits disk_size_gb disk_type docker_registry_push_url dry_run
    element_processing_timeout_minutes enable_artifact_caching enable_bucket_read_metric_counter
    enable_bucket_write_metric_counter enable_gcsio_blob_generation enable_hot_key_logging
    enable_streaming_engine environment_cache_millis environment_config environment_option
    environment_options environment_type expansion_port experiment experiments extra_package extra_packages
    files_to_stage flexrs_goal flink_job_server_jar flink_master flink_submit_uber_jar flink_version
    force_cloudpickle_deterministic_coders gbek gcp_oauth_scope gcp_oauth_scopes gcs_custom_audit_entries
    gcs_custom_audit_entry hdfs_full_urls hdfs_host hdfs_port hdfs_user impersonate_service_account
    jar_cache_dir job-server-timeout job_endpoint job_name job_port job_server_java_launcher
    job_server_jvm_properties job_server_jvm_property job_server_timeout label labels machine_type
    maven_repository_url max_cache_memory_usage_mb max_num_workers max_parallelism min_cpu_platform network
    no_auth no_direct_runner_use_stacked_bundle no_gcsio_throttling_counter no_pipeline_type_check
    no_save_main_session no_use_public_ips no_wait_until_finish num_workers number_of_worker_harness_threads
    on_success_matcher output_executable_path parallelism performance_runtime_type_check pickle_library
    prebuild_sdk_container_base_image prebuild_sdk_container_engine prism_beam_version_override
    prism_location prism_log_kind prism_log_level profile_cpu profile_location profile_memory
    profile_sample_rate project pubsub_root_url region requirements_cache requirements_cache_only_sources
    requirements_file resource_hint resource_hints runner runtime_type_check s3_access_key_id s3_api_version
    s3_disable_ssl s3_endpoint_url s3_region_name s3_secret_access_key s3_session_token s3_verify
    save_main_session sdk_container_image sdk_harness_container_image_overrides
    sdk_harness_log_level_overrides sdk_location sdk_worker_parallelism service_account_email setup_file
    spark_job_server_jar spark_master_url spark_rest_url spark_submit_uber_jar spark_version
    staging_location streaming subnetwork temp_location template_location transform_name_mapping
    type_check_additional type_check_strictness update update_compatibility_version use_public_ips
    use_transform_service user_agent wait_until_finish_duration worker_disk_type
    worker_harness_container_image worker_machine_type worker_region worker_zone zone
"""
BEAM_OPTION_NAMES = frozenset(_NAMES.split())


def flag_tokens(args: list[str] | tuple[str, ...]) -> list[str]:
    """The tokens of `args` that are flags (`-x`, `--name`, `--name=value`); values (negative numbers too) are not."""
    return [arg for arg in args if arg.startswith("-") and not _is_number(arg)]


def unknown_flags(args: list[str] | tuple[str, ...]) -> list[str]:
    """The flags in `args` (`--name` or `--name=value`) that are not Beam options; values are skipped."""
    return [flag for flag in flag_tokens(args) if flag.lstrip("-").partition("=")[0] not in BEAM_OPTION_NAMES
            or not flag.startswith("--")]


def unknown_option_message(flag: str, command: str, known: Iterable[str], passes_beam_args: bool) -> str:
    """The one line for a flag `command` does not define (`known`: its option strings), with the closest name.

    >>> unknown_option_message("--epohcs", "train", ["--epochs", "--steps"], False)
    'unknown option --epohcs (not a shardflow train option); did you mean --epochs?'
    """
    name = flag.partition("=")[0]
    candidates = list(known) + ([f"--{n}" for n in sorted(BEAM_OPTION_NAMES)] if passes_beam_args else [])
    close = difflib.get_close_matches(name, candidates, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    what = (f"neither a shardflow {command} option nor a Beam pipeline option" if passes_beam_args
            else f"not a shardflow {command} option")
    return f"unknown option {name} ({what}){hint}"


def flag_value(args: list[str] | tuple[str, ...], name: str) -> str | None:
    """The value of `--name=value` or `--name value` in `args` (the last one given), else None.

    >>> flag_value(["--direct_num_workers", "3", "--runner=X"], "direct_num_workers"), flag_value([], "runner")
    ('3', None)
    """
    value = None
    for position, arg in enumerate(args):
        if arg == f"--{name}" and position + 1 < len(args):
            value = args[position + 1]
        elif arg.startswith(f"--{name}="):
            value = arg.partition("=")[2]
    return value


def local_pool_workers(args: list[str] | tuple[str, ...], cpus: int) -> int | None:
    """Worker processes for a component's own local pool, or None when the flags ask for a Beam runner.

    Without `--runner` and `--direct_running_mode` the run is local and the pool is used, one worker
    per core or `--direct_num_workers`; naming either of them chooses Beam (no Beam import here).

    >>> local_pool_workers([], 2), local_pool_workers(["--direct_num_workers=3"], 2)
    (2, 3)
    >>> local_pool_workers(["--direct_running_mode=in_memory"], 2), local_pool_workers(["--runner", "DaskRunner"], 2)
    (None, None)
    """
    if flag_value(args, "runner") is not None or flag_value(args, "direct_running_mode") is not None:
        return None
    workers = flag_value(args, "direct_num_workers")
    count = int(workers) if workers is not None and workers.isdigit() else 0
    return count if count > 0 else max(1, cpus)  # Beam's 0 means one per core too


def _is_number(text: str) -> bool:
    """A negative number is an option's value (`--some_option -1`), not a flag."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def registered_option_names() -> frozenset[str]:
    """The option names the installed Beam registers, Dask's runner included (imports Beam: slow)."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser
    import apache_beam.runners.dask.dask_runner  # noqa: F401  (registers DaskOptions)

    parser = _BeamArgumentParser(allow_abbrev=False)
    for cls in dict.fromkeys(_subclasses(PipelineOptions)):
        cls._add_argparse_args(parser)
    return frozenset(s.lstrip("-") for a in parser._actions for s in a.option_strings) - {"h", "help"}


def _subclasses(cls: type) -> list[type]:
    return [d for sub in cls.__subclasses__() for d in (sub, *_subclasses(sub))]
