//! Fuzz entry points for what comes over HTTP: upstream streams and
//! responses, and inbound requests to `route --serve`.
