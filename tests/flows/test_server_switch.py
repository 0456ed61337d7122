"""A process that ran flows on one Prefect server and goes on to another: `flows.server.using_api`
lets go of the first, so that tagged tasks (concurrency slots) reach the second.

Prefect's per-process services keep the client of the API they first talked to. Found in CI: the UI
browser tests ran two chains on a server of their own and stopped it; the same worker's next chain, on
the session's test server, failed 9 minutes later (the client's retries) with
`ConcurrencySlotAcquisitionError ... All connection attempts failed`: its corpus task's slots were
asked of the stopped server."""

from __future__ import annotations

from prefect import flow, task

from flows.server import local_server, release_api_services, using_api


@task(tags=["storage:local", "stage:switch-test"])
def tagged() -> int:
    return 1


@flow
def with_a_tagged_task() -> int:
    return tagged()


def slot_services() -> dict[str, str]:
    """{tags: API URL} of this process's running concurrency-slot services."""
    from prefect._internal.concurrency.services import _QueueServiceBase
    from prefect.concurrency.services import ConcurrencySlotAcquisitionWithLeaseService

    return {
        ",".join(s.concurrency_limit_names): str(s._client.api_url)
        for s in list(_QueueServiceBase._instances.values())
        if isinstance(s, ConcurrencySlotAcquisitionWithLeaseService) and not s._stopped
    }


TAGS = "tag:stage:switch-test,tag:storage:local"


def test_using_api_lets_go_of_a_server_and_without_it_the_slots_stay_bound_to_it():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    release_api_services()  # started afresh on the server below, whatever a test before left
    with local_server() as api:
        # without using_api: the service stays bound to the server it first talked to (what CI met)
        with temporary_settings({PREFECT_API_URL: api}):
            assert with_a_tagged_task() == 1
        assert slot_services()[TAGS].rstrip("/") == api
        release_api_services()
        # with it: bound while the block runs, let go of after
        with using_api(api):
            assert with_a_tagged_task() == 1
            assert slot_services()[TAGS].rstrip("/") == api
        assert slot_services() == {}
    assert with_a_tagged_task() == 1  # on the session's test server (tests/flows/conftest.py)
    assert slot_services()[TAGS].rstrip("/") != api
