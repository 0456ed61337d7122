"""Prefect flows: the stages, the weekly re-pretraining, promotion, and the `albert` command line.

The Prefect API may be away for minutes (a server restart, a database failover, a deploy). Prefect's
client retries a call that could not connect 5 times, 2, 4, 8, 16 and 32 s apart: a minute, after
which a flow whose stage had already published its output crashed with a long httpx traceback. Every
process that imports `flows` first retries 8 times instead (2 to 256 s apart: about 8.5 minutes),
unless PREFECT_CLIENT_MAX_RETRIES is set: Prefect reads it when it is first imported, so it is set
here, before that. Deployments carry it in their job's environment (flows/deployments.py), since a
worker's flow-run process imports Prefect before our code.
"""

import os

API_RETRIES = {"PREFECT_CLIENT_MAX_RETRIES": "8"}

for _name, _value in API_RETRIES.items():
    os.environ.setdefault(_name, _value)
