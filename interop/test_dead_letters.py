"""Dead letters with rhea: Broker-J's DLQ arguments from the client's node properties, a
rejection and failed deliveries ending on the dead-letter queue, with their annotations."""

from __future__ import annotations

import json

from interop.clients import RHEA

DLQ_OPTIONS = ["--dynamic-node-properties"]


def dlq_queue(maximum: int) -> list[str]:
    properties = {"x-qpid-dlq-enabled": True, "x-qpid-maximum-delivery-count": maximum}
    return ["--capabilities", "create-on-demand", *DLQ_OPTIONS, json.dumps(properties)]


def test_a_message_rhea_rejects_lands_on_the_dead_letter_queue_annotated(broker, queue) -> None:
    RHEA.send(broker.url, queue, [{"body": "bad", "properties": {"n": 1}}], *dlq_queue(5))
    RHEA.receive(broker.url, queue, 1, options=["--outcome", "reject"])
    (dead,) = RHEA.receive(broker.url, queue + "_DLQ", 1, options=["--print-annotations"])
    assert (dead["body"], dead["properties"]) == ("bad", {"n": 1})
    annotations = dead["annotations"]
    assert annotations["x-opt-dead-letter-reason"] == "rejected"
    assert annotations["x-opt-dead-letter-queue"] == queue
    assert annotations["x-opt-dead-letter-description"] == "app:invalid: cannot process"


def test_a_message_rhea_fails_to_process_twice_goes_at_its_maximum(broker, queue) -> None:
    RHEA.send(broker.url, queue, [{"body": "poison"}], *dlq_queue(2))
    options = ["--outcome", "modified-failed", "--credit", "1"]
    tries = RHEA.receive(broker.url, queue, 2, options=options)  # it comes back once
    assert [m["body"] for m in tries] == ["poison", "poison"]
    (dead,) = RHEA.receive(broker.url, queue + "_DLQ", 1, options=["--print-annotations"])
    assert dead["body"] == "poison"
    assert dead["annotations"]["x-opt-dead-letter-reason"] == "maximum-delivery-attempts"
    assert dead["annotations"]["x-opt-dead-letter-count"] == 1
