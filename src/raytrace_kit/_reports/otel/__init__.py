"""The call tree as OpenTelemetry traces: one span per execution, for any OTLP backend."""
