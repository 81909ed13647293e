"""The TLS tests' certificates: made by harness.certificates (product code, since `groupshift
kafka start --security` makes them too); this name stays for the tests that import it."""

from harness.certificates import PASSWORD, Authority, Issued

__all__ = ["PASSWORD", "Authority", "Issued"]
