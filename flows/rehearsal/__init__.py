"""The rehearsal harness: local stand-ins for what production runs on, and `albert rehearse`, which runs
the weekly schedule on them (docs/production.md).

- `rehearse`: the weekly run of infra/prefect.yaml, two weeks back to back, then a rollback;
- `gcs_emulator`: a GCS emulator on 127.0.0.1 that every process reaches through STORAGE_EMULATOR_HOST;
- `portable`: the bundled sample through Beam's portable path (job server, SDK harnesses);
- `prefect_check`: Prefect as its users drive it (`albert deploy`, the CLI's list commands, a worker).

The product never imports this package (tests/test_architecture.py): the CLI names `albert rehearse` by
its module path only, and imports it when that command runs."""
