//! What the joins count and sample: exact key counts ([`key_stats`]), Space-Saving summaries
//! ([`heavy_hitters`]), per-worker key samples ([`sample`]) and the per-partition load every
//! join records ([`load`]).

pub mod heavy_hitters;
pub mod key_stats;
pub mod load;
pub mod sample;
