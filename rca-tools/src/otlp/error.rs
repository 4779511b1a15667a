//! What can go wrong receiving OTLP, sorted by what the sender should do.

/// Why an export request was not accepted. Each maps to the HTTP status the OTLP/HTTP
/// specification prescribes ([`OtlpError::http_status`]) and says whether the sender may retry
/// ([`OtlpError::retryable`]); nothing of a refused request is kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The body could not be decoded (bad protobuf or JSON, bad gzip, bad ids): fix the sender.
    #[error("bad OTLP request: {message}")]
    BadRequest {
        /// What is wrong with it.
        message: String,
    },
    /// The content type is neither `application/x-protobuf` nor `application/json`, or the
    /// content encoding is neither absent, `identity` nor `gzip`.
    #[error(
        "unsupported media type {found:?}: send application/x-protobuf or application/json, optionally gzip-encoded"
    )]
    UnsupportedMediaType {
        /// The content type or encoding received.
        found: String,
    },
    /// The body (as sent, or once decompressed) is larger than the intake accepts: send
    /// smaller batches.
    #[error("request too large: {what} is over the limit of {limit} bytes")]
    TooLarge {
        /// Which size: the body or the decompressed body.
        what: &'static str,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The store behind the intake is full (an incident directory at its size limit): the data
    /// was not kept, and sending it again will not help until space is made.
    #[error("telemetry store full: {message}")]
    StoreFull {
        /// What is full.
        message: String,
    },
    /// The store could not take the data just now (a failed write): retry later.
    #[error("telemetry store unavailable: {message}")]
    StoreUnavailable {
        /// What happened.
        message: String,
    },
    /// As many requests as the intake decodes at once are being decoded: retry later (the
    /// refusal of the Collector's memory limiter, before any memory is spent on the body).
    #[error("busy: {limit} export requests are being decoded; retry later")]
    Busy {
        /// The most requests decoded at once.
        limit: usize,
    },
}

impl OtlpError {
    /// The HTTP status of the refusal.
    pub fn http_status(&self) -> u16 {
        match self {
            OtlpError::BadRequest { .. } => 400,
            OtlpError::UnsupportedMediaType { .. } => 415,
            OtlpError::TooLarge { .. } => 413,
            OtlpError::StoreFull { .. } => 507,
            OtlpError::StoreUnavailable { .. } | OtlpError::Busy { .. } => 503,
        }
    }

    /// Whether the sender may send the same request again later (OTLP/HTTP retries 503 with
    /// its `Retry-After`).
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            OtlpError::StoreUnavailable { .. } | OtlpError::Busy { .. }
        )
    }

    /// The gRPC status code of the `google.rpc.Status` body (3 invalid argument, 8 resource
    /// exhausted, 14 unavailable).
    pub fn rpc_code(&self) -> i32 {
        match self {
            OtlpError::BadRequest { .. } | OtlpError::UnsupportedMediaType { .. } => 3,
            OtlpError::TooLarge { .. } | OtlpError::StoreFull { .. } => 8,
            OtlpError::StoreUnavailable { .. } | OtlpError::Busy { .. } => 14,
        }
    }
}

/// Why a [`TelemetrySink`](super::TelemetrySink) did not keep a batch (it kept none of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// No room for the batch: the store is at its configured size.
    #[error("{message}")]
    Full {
        /// What is full.
        message: String,
    },
    /// Writing failed; a later attempt may succeed.
    #[error("{message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
}

impl From<SinkError> for OtlpError {
    fn from(e: SinkError) -> Self {
        match e {
            SinkError::Full { message } => OtlpError::StoreFull { message },
            SinkError::Unavailable { message } => OtlpError::StoreUnavailable { message },
        }
    }
}
