"""The test lab: network namespaces joined by veth links, and everything started in them."""
