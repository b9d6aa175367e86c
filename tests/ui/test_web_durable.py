"""`toolweave web --durable-db`: the calls of durable conversations waiting for a decision,
in the page and on its API, against a real PostgreSQL and a real worker
(tests/durable/worker.py's `bank` conversation with an `approve-*` tag, paused at `pay`):
approved from the page in headless Chromium, or denied over HTTP, the conversation goes on."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

pytest.importorskip("dbos", reason="the durable extra (dbos) is not installed")

from ..durable.conftest import Workers, client_factory, db_url, postgres, workers  # noqa: F401
from ..durable.test_approvals import wait_pending
from .conftest import web_server
from .test_browser import _shot, browser  # noqa: F401

pytestmark = pytest.mark.durable

QUEUE = "tw-conversations"


def _start(pool: Workers, make_client: Any, cid: str, tag: str) -> Any:
    """A worker (it creates the database), and the `bank` conversation paused at `pay`."""
    pool.start("w1")
    client = make_client()
    client.submit("bank", tag, queue=QUEUE, conversation_id=cid)
    ((_, call),) = wait_pending(client, cid)
    assert (call.id, call.tool_name, call.reason) == ("p1", "pay", "approval")
    return client


def test_a_pending_approval_is_approved_from_the_page(
    browser: Any,  # noqa: F811
    workers: Workers,  # noqa: F811
    client_factory: Any,  # noqa: F811
    db_url: str,  # noqa: F811
) -> None:
    tag, cid = "approve-web-page", "conv-web-approve"
    client = _start(workers, client_factory, cid, tag)
    with web_server("--durable-db", db_url, "--durable-app", "twtest") as web:
        assert "durable conversations of app twtest" in web.banner
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.set_default_timeout(60_000)
        page.goto(f"{web.base}/?token={web.token}")
        card = page.locator(f"[data-testid=pending-call][data-conversation={cid}][data-call=p1]")
        card.wait_for()
        assert card.get_attribute("data-tool") == "pay"
        assert '"to": "Bob"' in card.locator("[data-testid=pending-args]").inner_text()
        assert not workers.log.matching(f"pay {tag} ")  # nothing ran before the decision
        _shot(page, "durable-1-pending")

        card.locator("[data-testid=pending-approve]").click()
        # the card says so, or is gone already (the next refresh found the call decided)
        page.wait_for_function(
            """(cid) => {
              const card = document.querySelector(
                `[data-testid=pending-call][data-conversation="${cid}"][data-call=p1]`);
              return card ? card.dataset.decided !== undefined : true;
            }""",
            arg=cid,
        )
        assert card.count() == 0 or card.get_attribute("data-decided") == "approve"
        result = client.result(cid, timeout=120)
        assert result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
        assert len(workers.log.matching(f"pay {tag} ")) == 1
        page.click("[data-testid=durable-refresh]")
        page.locator("[data-testid=durable-empty]").wait_for()
        _shot(page, "durable-2-decided")
        page.close()


def test_the_pending_api_lists_and_denies_and_refuses_what_does_not_fit(
    workers: Workers,  # noqa: F811
    client_factory: Any,  # noqa: F811
    db_url: str,  # noqa: F811
) -> None:
    tag, cid = "approve-web-deny", "conv-web-deny"
    client = _start(workers, client_factory, cid, tag)
    with web_server("--durable-db", db_url, "--durable-app", "twtest") as web:
        http = httpx.Client(
            base_url=web.base, headers={"authorization": f"Bearer {web.token}"}, timeout=60
        )
        with http:
            assert http.get("/api/info").json()["durable"] is True
            listed = http.get("/api/durable/pending").json()
            assert listed["enabled"] is True
            assert [(c["conversation_id"], c["id"], c["tool_name"]) for c in listed["calls"]] == [
                (cid, "p1", "pay")
            ]
            bad = http.post("/api/durable/decide", json={"conversation_id": cid, "call_id": "p1"})
            assert bad.status_code == 400, bad.text
            unknown = {"conversation_id": cid, "call_id": "nope", "decision": "approve"}
            missing = http.post("/api/durable/decide", json=unknown)
            assert missing.status_code == 409 and "no call 'nope' waiting" in missing.text

            deny = {"conversation_id": cid, "call_id": "p1", "decision": "deny", "reason": "no"}
            denied = http.post("/api/durable/decide", json=deny)
            assert denied.status_code == 200 and denied.json() == {"recorded": True}
            again = http.post("/api/durable/decide", json=deny)
            assert again.json() == {"recorded": False}  # the same decision: a no-op
            approve = {**deny, "decision": "approve"}
            conflict = http.post("/api/durable/decide", json=approve)
            assert conflict.status_code == 409, conflict.text  # the first decision won

            client.result(cid, timeout=120)
            assert not workers.log.matching(f"pay {tag} ")  # denied: never ran
            deadline = time.monotonic() + 60
            while http.get("/api/durable/pending").json()["calls"]:
                assert time.monotonic() < deadline, "the denied call is still listed"
                time.sleep(0.2)


def test_without_a_durable_database_there_is_nothing_to_decide() -> None:
    with web_server() as web:
        auth = {"authorization": f"Bearer {web.token}"}
        with httpx.Client(base_url=web.base, headers=auth, timeout=30) as http:
            assert http.get("/api/info").json()["durable"] is False
            assert http.get("/api/durable/pending").json() == {"enabled": False, "calls": []}
            body = {"conversation_id": "c", "call_id": "p1", "decision": "approve"}
            assert http.post("/api/durable/decide", json=body).status_code == 404
