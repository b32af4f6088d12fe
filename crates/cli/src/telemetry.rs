//! Logging on stderr, and (with the `otel` cargo feature) the tracing spans exported over OTLP/HTTP.
//!
//! Export is off unless the build has the feature and the environment names a collector with the OpenTelemetry
//! variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`); the other standard
//! variables (`OTEL_SERVICE_NAME`, `OTEL_BSP_SCHEDULE_DELAY`, headers, timeout) apply as the SDK reads them.
//! Spans go through the SDK's batch processor, which exports from a thread of its own: a slow or absent collector
//! costs a queue slot, never a relayed call's time, and a full queue drops spans, never blocks. The stderr log keeps
//! its own level (`TOOLGATE_LOG`, `-v`); the exporter sees toolgate's spans down to `debug` (the per-request span).
//! Never prints to stdout, which may carry MCP.

use std::io::IsTerminal as _;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Keeps the exporter alive; [`Telemetry::shutdown`] sends what is still queued.
pub(crate) struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still queued and stops the exporter (bounded by the SDK's export timeout).
    pub(crate) fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "the last spans could not be exported");
        }
    }
}

/// How every field and message of a log line is written: escaped by `core::display`, so a tool name, an upstream's
/// stderr line or any other text from outside cannot start a line of its own, move the cursor or reorder the line
/// (a newline in a tool name used to forge a whole log line).
fn escaped_fields() -> impl for<'writer> tracing_subscriber::fmt::FormatFields<'writer> + 'static {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = toolgate_core::display::escape(&format!("{value:?}"));
        if field.name() == "message" { write!(writer, "{text}") } else { write!(writer, "{field}={text}") }
    })
    .delimited(" ")
}

/// Installs the stderr log at `default_level` (or `TOOLGATE_LOG`) and, when configured, the span exporter.
pub(crate) fn init(default_level: &str) -> Telemetry {
    let filter = EnvFilter::try_from_env("TOOLGATE_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    // stdout may carry MCP (demo-server) or a report: logs always go to stderr. Colours only on a terminal: a
    // desktop client that launches toolgate keeps its stderr in a log file, where escape codes are noise.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .fmt_fields(escaped_fields())
        .with_filter(filter);
    #[cfg(feature = "otel")]
    {
        let (layer, provider) = match otel::layer() {
            Ok(Some((layer, provider))) => (Some(layer), Some(provider)),
            Ok(None) => (None, None),
            Err(error) => {
                // Logging is not up yet: this one line goes to stderr directly.
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("toolgate: OpenTelemetry export is off: {error}");
                }
                (None, None)
            }
        };
        let _ = tracing_subscriber::registry().with(layer).with(stderr).try_init();
        Telemetry { provider }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = tracing_subscriber::registry().with(stderr).try_init();
        Telemetry {}
    }
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::registry::Registry;

    /// The variables that name a collector; without either, nothing is exported.
    const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

    type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

    /// The exporting layer and its provider, when a collector is configured.
    pub(super) fn layer() -> Result<Option<(BoxedLayer, SdkTracerProvider)>, opentelemetry_otlp::ExporterBuildError> {
        let configured =
            ENDPOINT_VARIABLES.iter().any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
        if !configured {
            return Ok(None);
        }
        // reqwest is built without a default TLS provider (`rustls-no-provider`): install ring, as the upstream
        // HTTP client does, before the exporter builds its client (an https collector needs it; the first install
        // wins, so the order with the upstream client does not matter).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // The endpoint, headers and timeout come from the standard variables.
        let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build()?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("toolgate");
        }
        let provider =
            SdkTracerProvider::builder().with_resource(resource.build()).with_batch_exporter(exporter).build();
        let tracer = provider.tracer("toolgate");
        // toolgate's own spans, the per-request one (debug) included; dependencies' spans stay out.
        let targets = Targets::new().with_target("toolgate", LevelFilter::DEBUG);
        let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(targets).boxed();
        Ok(Some((layer, provider)))
    }
}
