"""The HTTP gateway (the sequence-history HTTP API, docs/sequence-history.md), served by the
broker process when the config's ``http`` section enables it: see
:mod:`proton_broker.http.gateway`."""
