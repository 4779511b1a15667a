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
    /// The request would take more memory once decoded than one request may
    /// ([`OtlpLimits::max_request_memory_bytes`](super::OtlpLimits::max_request_memory_bytes),
    /// or twice that past the intake's whole
    /// [`OtlpLimits::max_memory_bytes`](super::OtlpLimits::max_memory_bytes)), as estimated
    /// from its body before decoding it: send smaller batches.
    #[error(
        "request too large: it would take about {estimate} bytes of memory once decoded, over the limit of {limit} bytes"
    )]
    TooMuchMemory {
        /// The estimate, in bytes (at least this much: the estimate stops past the limit).
        estimate: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Taking the request now would pass the intake's memory limit
    /// ([`OtlpLimits::max_memory_bytes`](super::OtlpLimits::max_memory_bytes)): the requests
    /// being decoded and what the store holds leave no room for it. Retry later (the refusal of
    /// the Collector's memory limiter, before the body is decoded).
    #[error(
        "memory limit: this request needs about {needed} bytes, while {reserved} are reserved by requests being decoded and the store holds {held}, of a limit of {limit} bytes; retry later"
    )]
    MemoryPressure {
        /// What the request would reserve, in bytes.
        needed: u64,
        /// What requests being decoded have reserved, in bytes.
        reserved: u64,
        /// What the store holds, in bytes.
        held: u64,
        /// The limit, in bytes.
        limit: u64,
    },
}

impl OtlpError {
    /// The HTTP status of the refusal.
    pub fn http_status(&self) -> u16 {
        match self {
            OtlpError::BadRequest { .. } => 400,
            OtlpError::UnsupportedMediaType { .. } => 415,
            OtlpError::TooLarge { .. } | OtlpError::TooMuchMemory { .. } => 413,
            OtlpError::StoreFull { .. } => 507,
            OtlpError::StoreUnavailable { .. }
            | OtlpError::Busy { .. }
            | OtlpError::MemoryPressure { .. } => 503,
        }
    }

    /// Whether the sender may send the same request again later (OTLP/HTTP retries 503 with
    /// its `Retry-After`).
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            OtlpError::StoreUnavailable { .. }
                | OtlpError::Busy { .. }
                | OtlpError::MemoryPressure { .. }
        )
    }

    /// The gRPC status code of the `google.rpc.Status` body (3 invalid argument, 8 resource
    /// exhausted, 14 unavailable).
    pub fn rpc_code(&self) -> i32 {
        match self {
            OtlpError::BadRequest { .. } | OtlpError::UnsupportedMediaType { .. } => 3,
            OtlpError::TooLarge { .. }
            | OtlpError::TooMuchMemory { .. }
            | OtlpError::StoreFull { .. } => 8,
            OtlpError::StoreUnavailable { .. }
            | OtlpError::Busy { .. }
            | OtlpError::MemoryPressure { .. } => 14,
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
