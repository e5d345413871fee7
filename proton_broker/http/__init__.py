"""The HTTP gateway (the sequence seed's HTTP API), served by the broker process when the
config's ``http`` section enables it: see :mod:`proton_broker.http.gateway`."""
