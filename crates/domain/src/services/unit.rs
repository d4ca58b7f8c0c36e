//! The one way a use case writes: in a unit of work that commits only what succeeded.

use super::Capstan;
use crate::error::DomainResult;
use crate::ports::{Scope, Unit};
use std::future::Future;
use std::pin::Pin;

/// What a write unit runs: an async closure over the unit (`async |tx| { ... }`).
///
/// `AsyncFnOnce` alone cannot say its future is `Send` (its `CallOnceFuture` is unstable), and
/// without that the use cases could not run on spawned tasks: the compiler loses the unit's
/// lifetime when it checks their futures ("implementation of `Send` is not general enough").
/// An async closure is also an `FnOnce` returning its future, which this trait names, so the
/// bound can ask for `Send` and the closure's signature is still inferred at the call.
pub trait UnitWork<A, R>: AsyncFnOnce(A) -> R + FnOnce(A) -> <Self as UnitWork<A, R>>::Fut {
    type Fut: Future<Output = R>;
}

impl<F, A, Fut, R> UnitWork<A, R> for F
where
    F: AsyncFnOnce(A) -> R + FnOnce(A) -> Fut,
    Fut: Future<Output = R>,
{
    type Fut = Fut;
}

impl Capstan {
    /// Runs `work` in a write unit that first holds `locks`, in the order given, and commits
    /// the unit only when `work` succeeds, answering what it answered: no use case can leave
    /// its unit without the commit, nor keep half of what failed (an error drops the unit,
    /// which rolls it back). Scopes found only by a read, or shared, `work` takes itself.
    /// Public so that the stores' tests can show what it keeps and what it rolls back.
    pub async fn in_unit<T, F>(&self, locks: &[Scope], work: F) -> DomainResult<T>
    where
        for<'t> F: UnitWork<&'t mut Unit, DomainResult<T>, Fut: Send> + Send,
        T: Send,
    {
        let mut unit = self.store.write().await?;
        for scope in locks {
            unit.lock(*scope).await?;
        }
        // Boxed as `Send` here, where the bound proves it: held unboxed, the caller's future
        // would have to prove it again without the unit's lifetime, and could not.
        let running: Pin<Box<dyn Future<Output = DomainResult<T>> + Send + '_>> =
            Box::pin(work(&mut *unit));
        let value = running.await?;
        unit.commit().await?;
        Ok(value)
    }
}
