//! The home partition of a record (see [`crate::compose`]), apart from the builders that take it
//! so that AM-Join's routing and `compose` both use it without depending on each other.

use std::rc::Rc;

/// The home partition of a record.
pub type Home<K, V> = Rc<dyn Fn(&K, &V) -> u32>;
