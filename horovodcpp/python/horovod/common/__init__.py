"""Framework-independent parts: exceptions, process sets, the elastic state base."""
