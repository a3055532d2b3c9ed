//! The strategies, a module each (a family shares one: IB-Join with DER and DDR, AM-Join with
//! the Tree-Join inside it, VPRP with VPRP-T): what each is called, when it can
//! run and which side it copies, how a user tunes it, what it predicts and reports, and its
//! dataflow, all in [`JoinStrategy`]. [`crate::strategy`]'s registry lists them.
//!
//! A new strategy is a module here implementing [`JoinStrategy`], its `mod` and `pub use` lines
//! below, and a line in the registry; every list of strategies (the command line's, `explain`'s,
//! the browser's, the Python package's, the tests that walk `Strategy::CONCRETE`) reads the
//! registry. The exactness tests (`planner/tests/exactness.rs`) list resolved strategies by
//! hand, as they choose the settings to test each with: a new strategy adds its entries there.

mod am;
mod broadcast;
mod ib;
mod kind;
mod shuffle;
mod tree_basic;
mod vprp;

pub use am::{Am, Tree};
pub use broadcast::Broadcast;
pub use ib::{Ddr, Der, Ib};
pub(crate) use kind::join_dataflow;
pub use kind::{JoinSetup, JoinStrategy};
pub use shuffle::Shuffle;
pub use tree_basic::TreeBasic;
pub use vprp::{Vprp, VprpSettings, VprpT};
