//! Body wrappers: stream frame by frame (never buffer a whole body), count
//! bytes, and finish the egress entry when the response body ends.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::egress::Pending;

/// A body that adds the length of each data frame to a counter as it passes.
#[derive(Debug)]
pub(crate) struct Counted<B> {
    inner: B,
    counter: Arc<AtomicU64>,
}

impl<B> Counted<B> {
    pub(crate) fn new(inner: B, counter: Arc<AtomicU64>) -> Self {
        Counted { inner, counter }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.counter.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What the gateway answers with: a short text of its own, or an upstream's
/// body streamed through. Holds the request's pending egress entry, which is
/// recorded when the body ends or is dropped (the client went away).
#[derive(Debug)]
pub(crate) struct GatewayBody {
    kind: Kind,
    pending: Option<Pending>,
}

#[derive(Debug)]
enum Kind {
    Text(Option<Bytes>),
    Stream(Counted<Incoming>),
}

impl GatewayBody {
    pub(crate) fn text(text: impl Into<Bytes>) -> Self {
        GatewayBody { kind: Kind::Text(Some(text.into())), pending: None }
    }

    pub(crate) fn empty() -> Self {
        GatewayBody { kind: Kind::Text(None), pending: None }
    }

    pub(crate) fn stream(body: Counted<Incoming>, pending: Pending) -> Self {
        GatewayBody { kind: Kind::Stream(body), pending: Some(pending) }
    }
}

impl Body for GatewayBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = match &mut self.kind {
            Kind::Text(text) => Poll::Ready(text.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(body) => Pin::new(body).poll_frame(cx),
        };
        match &polled {
            // The end, or an upstream error that ends it: the entry is complete now, not when hyper drops the body.
            Poll::Ready(None) => drop(self.pending.take()),
            Poll::Ready(Some(Err(e))) => {
                // A body cut short (a reset, a close before its length) says so: its status alone reads as whole.
                if let Some(pending) = self.pending.as_mut() {
                    let why = crate::error::error_chain(e);
                    pending.note(&format!("failed to relay the upstream's body: {why}"));
                }
                drop(self.pending.take())
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Text(text) => text.is_none(),
            Kind::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Text(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Text(None) => SizeHint::with_exact(0),
            Kind::Stream(body) => body.size_hint(),
        }
    }
}
