"""`albert ui`: the Prefect UI on the runs of a demo folder (or of any Prefect home), until Ctrl-C.

    albert ui [--out out/demo] [--port 4200]

`albert demo` runs its flows on Prefect's ephemeral server, whose SQLite database stays in
`<out>/prefect-home/`. This serves that database with the UI on http://127.0.0.1:PORT. It sets what a
bare `prefect server start --port P` does not: the UI's own API URL (PREFECT_UI_API_URL). Prefect
derives that from PREFECT_SERVER_API_PORT, not from --port, so on any port but 4200 every page of the
UI said "Can't connect to Server API". The server is flows/server.py's local_server with the UI on.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

from core import config_cli, storage
from core.config_cli import opt
from core.errors import UserError
from flows.demo import DEFAULT_OUT, prefect_home


@dataclass
class UiOptions:
    """`albert ui`: serve the Prefect UI on a demo folder's runs."""

    out: str = opt(
        DEFAULT_OUT,
        f"the demo's storage root (its Prefect database is in <out>/prefect-home) [{DEFAULT_OUT}]",
    )
    port: int = opt(4200, "port of the UI and API on 127.0.0.1")


def ui_env(api_url: str) -> dict[str, str]:
    """The server's settings for a UI that talks to this server's API."""
    return {"PREFECT_SERVER_UI_ENABLED": "true", "PREFECT_UI_API_URL": api_url}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(parser, UiOptions)


def run(args: argparse.Namespace) -> int:
    from flows.server import HOST, local_server

    options = config_cli.from_args(UiOptions, args)
    home = prefect_home(options.out)
    if not os.path.isfile(os.path.join(home, "prefect.db")):
        raise UserError(
            f"{home} holds no Prefect database: run `albert demo --out {options.out}` first "
            "(or give the --out of a demo that ran)"
        )
    api_url = f"http://{HOST}:{options.port}/api"
    try:  # Ctrl-C is how the UI stops, at any moment: while the server starts too
        with local_server(home=home, port=options.port, env=ui_env(api_url)):
            print(
                f"Prefect UI on the runs of {storage.absolute(options.out)}: http://{HOST}:{options.port}",
                flush=True,
            )
            print("(from another machine: ssh -L 4200:127.0.0.1:4200 this-host, then http://127.0.0.1:4200)")
            print("Ctrl-C stops it.", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("Prefect UI stopped.", flush=True)
    return 0
