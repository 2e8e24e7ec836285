//! What `check` and `route` share to talk to a provider: the HTTP client
//! ([`http`]), each wire format ([`dialect`]), the reading of what an
//! upstream said into a failure class ([`classify`]) and into a wait
//! ([`hints`]), and the redaction of
//! keys from anything that comes back ([`secret`]); and a streamed reply
//! read to its end for a probe, with its time to the first token
//! ([`streamed`]).

pub(crate) mod classify;
pub mod dialect;
pub(crate) mod hints;
pub mod http;
pub(crate) mod secret;
pub(crate) mod streamed;
