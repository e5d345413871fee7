"""Who a client is and what it may do: users (the sasldb file) and the Qpid ACL file."""
