"""The time in front of every log line (foldserve's and uvicorn's): a log file or a plain
`make serve` has no other clock; under systemd the journal keeps its own as well."""
LOG_PREFIX = "%(asctime)s.%(msecs)03d "
LOG_FORMAT = LOG_PREFIX + "%(message)s"
LOG_DATE = "%Y-%m-%d %H:%M:%S"
