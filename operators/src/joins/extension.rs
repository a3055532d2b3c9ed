//! The extension-trait skeleton every join operator shares, written once.
//!
//! Each join is offered as timely operators are: a trait on `StreamVec<(K, L)>` with a
//! `*_with` method that hands each output row to a closure and a plain method that emits
//! `(key, left, right)` rows. Only the trait's name, its docs, the join's own parameters and the
//! function that builds the dataflow differ from join to join; [`join_extension!`] writes the
//! rest, so a change to the shape (a bound, a parameter every join takes) is made in one place.

/// Declares a join's extension trait and implements it for `StreamVec<'s, T, (K, L)>`.
///
/// ```text
/// join_extension! {
///     /// Trait docs (with its doc example).
///     pub trait DerJoin {
///         /// Docs of the method taking a closure per output row.
///         fn der_join_with;
///         /// Docs of the method emitting `(key, left, right)` rows.
///         fn der_join;
///     }
///     params(small: Side);
///     built_by |left, right, how, config, logic| {
///         join_in_mode(TrackingMode::Der, left, right, how, small, config, logic)
///     };
/// }
/// ```
///
/// `built_by` is the body of the `*_with` method, given the inputs, the join type, the config,
/// the join's own parameters by their names and `logic`, the caller's closure made a
/// [`JoinLogic`](crate::join_logic::JoinLogic); it returns the output stream. Write
/// `built_by |..| { .. }, fallible;` where the body returns `Result<_, JoinError>` (a join whose
/// parameters can be refused), and both methods return that `Result`.
macro_rules! join_extension {
    (
        $(#[$trait_meta:meta])*
        pub trait $Trait:ident {
            $(#[$with_meta:meta])*
            fn $with:ident;
            $(#[$rows_meta:meta])*
            fn $rows:ident;
        }
        params($($param:ident : $Param:ty),*);
        built_by |$left:ident, $right:ident, $how:ident, $config:ident, $logic:ident| $build:block $(, $fallible:ident)?;
    ) => {
        $(#[$trait_meta])*
        pub trait $Trait<'s, T: ::timely::progress::Timestamp, K: $crate::key::JoinKey, L: ::timely::ExchangeData + Clone> {
            $(#[$with_meta])*
            fn $with<R, D, F>(
                self,
                right: ::timely::dataflow::StreamVec<'s, T, (K, R)>,
                how: $crate::join_type::JoinType,
                $($param: $Param,)*
                config: &$crate::config::JoinConfig,
                logic: F,
            ) -> $crate::joins::extension::join_extension!(@output $($fallible)? ::timely::dataflow::StreamVec<'s, T, D>)
            where
                R: ::timely::ExchangeData + Clone,
                D: Clone + 'static,
                F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static;

            $(#[$rows_meta])*
            fn $rows<R>(
                self,
                right: ::timely::dataflow::StreamVec<'s, T, (K, R)>,
                how: $crate::join_type::JoinType,
                $($param: $Param,)*
                config: &$crate::config::JoinConfig,
            ) -> $crate::joins::extension::join_extension!(@output $($fallible)?
                ::timely::dataflow::StreamVec<'s, T, $crate::reference::JoinedRow<K, L, R>>)
            where
                R: ::timely::ExchangeData + Clone,
                Self: Sized,
            {
                self.$with(right, how, $($param,)* config, |key, left, right, out| {
                    out.push((key.clone(), left.cloned(), right.cloned()))
                })
            }
        }

        impl<'s, T, K, L> $Trait<'s, T, K, L> for ::timely::dataflow::StreamVec<'s, T, (K, L)>
        where
            T: ::timely::progress::Timestamp,
            K: $crate::key::JoinKey,
            L: ::timely::ExchangeData + Clone,
        {
            fn $with<R, D, F>(
                self,
                right: ::timely::dataflow::StreamVec<'s, T, (K, R)>,
                how: $crate::join_type::JoinType,
                $($param: $Param,)*
                config: &$crate::config::JoinConfig,
                logic: F,
            ) -> $crate::joins::extension::join_extension!(@output $($fallible)? ::timely::dataflow::StreamVec<'s, T, D>)
            where
                R: ::timely::ExchangeData + Clone,
                D: Clone + 'static,
                F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
            {
                let ($left, $right, $how, $config) = (self, right, how, config);
                let $logic = $crate::join_logic::each_row(logic);
                $build
            }
        }
    };
    (@output fallible $Stream:ty) => { Result<$Stream, $crate::error::JoinError> };
    (@output $Stream:ty) => { $Stream };
}

pub(crate) use join_extension;
