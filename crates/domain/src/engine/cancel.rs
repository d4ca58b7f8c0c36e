//! How a running step learns that its request was canceled.

use tokio::sync::watch;

/// Tells a running step that its request was canceled.
#[derive(Debug)]
pub struct CancelHandle(watch::Sender<bool>);

/// What a step watches for its request's cancel.
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub fn pair() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(false);
        (CancelHandle(tx), Cancel(rx))
    }

    pub fn is_canceled(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the request is canceled; never, if it is not.
    pub async fn canceled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}
