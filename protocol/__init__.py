"""The Kafka wire protocol (docs/architecture.md, "protocol/"): varints, request and response
codecs over kio, the pre-decode length guard, compiled response writers and versioned entity
building. It depends on nothing of groupshift's; the server, the upstream proxy and the tools
all build on it."""
