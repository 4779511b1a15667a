//! A request body with a deadline: a client that sends its body too slowly gets an error
//! instead of holding a handler (and its memory) open.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::stats::ListenerCounters;

/// The error type of bodies passed to the router.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `inner`, failing once `timeout` has passed since the request's headers arrived.
pub struct TimedBody<B> {
    inner: B,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    counters: Arc<ListenerCounters>,
}

impl<B> TimedBody<B> {
    /// `inner` with `timeout` from now; a timeout is counted in `counters`.
    pub fn new(inner: B, timeout: Duration, counters: Arc<ListenerCounters>) -> Self {
        TimedBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            counters,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.counters.body_timeout();
            let message = format!(
                "the request body did not arrive within {} s",
                this.timeout.as_secs()
            );
            return Poll::Ready(Some(Err(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                message,
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
