"""Deploy: make a KServe InferenceService serve the version the serving pointer (CURRENT.json) names.

`shardflow deploy` (config.py's `DeployConfig`, executor.py's `run`) writes or patches the InferenceService:
`storageUri` the version's own prefix (pusher/layout.py), `--canary-percent P` as a canary. `shardflow promote`
(promote.py) and `shardflow rollback --inference-service` (rollback.py) move the pointer and the InferenceService
together (docs/kserve.md). The executors import the `kubernetes` client, so this package exports nothing eagerly.
"""
