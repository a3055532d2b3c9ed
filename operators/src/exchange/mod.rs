//! Exchange and routing: which partition a record goes to ([`route`], with the one rule for
//! NULL keys), which worker a partition lives on ([`partition`]), VPRP's routing by sorted key
//! ranges ([`range_pact`]), the stable hashes both use ([`hash`]) and the containers an exchange
//! of every record sends ([`batch_builder`]).

pub mod batch_builder;
pub mod hash;
pub mod partition;
pub mod range_pact;
pub mod route;
