package server

import (
	"context"
	"log/slog"
	"os"

	"github.com/99designs/gqlgen/graphql"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is opt-in: with OTEL_EXPORTER_OTLP_ENDPOINT set (or Config.TraceExporter, for tests), every GraphQL
// operation is a span (type, name, root fields, error codes; never the document, variables or keys) and the Redis
// commands it makes are its children (command name and server only: no arguments, so no keys or values). A
// subscription gets one span for its start, none per event. Redis commands outside a traced operation (the
// hub's refreshes, pipelines shared by several requests) are not recorded. The exporter is OTLP over HTTP and
// reads the standard OTEL_EXPORTER_OTLP_* variables; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// service (default "leaderboard").

// tracerName is the instrumentation scope of the server's own spans.
const tracerName = "github.com/leaderboard/leaderboard/internal/server"

// startTracing returns the provider the server traces with, or nil when tracing is off. OpenTelemetry's errors
// (an export that failed: the collector is down) go to log, not to the standard log package's stderr, which is
// OpenTelemetry's default. The handler is process-wide: the last server started with tracing owns it.
func startTracing(ctx context.Context, cfg Config, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	exp := cfg.TraceExporter
	if exp == nil {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
		var err error
		if exp, err = otlptracehttp.New(ctx); err != nil {
			return nil, err
		}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", "err", err)
	}))
	b := Build()
	res, err := resource.Merge(resource.NewSchemaless(
		attribute.String("service.name", "leaderboard"), attribute.String("service.version", b.Version)),
		resource.Environment())
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(operationsOnly{}))), nil
}

// operationsOnly samples the spans that start a trace unless they are client calls (Redis commands with no
// operation around them); spans inside a trace follow their parent (ParentBased).
type operationsOnly struct{}

func (operationsOnly) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Kind == trace.SpanKindClient {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
		Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (operationsOnly) Description() string { return "OperationsOnly" }

// traceRedis adds spans of Redis commands, without their arguments.
func traceRedis(rdb redis.UniversalClient, tp trace.TracerProvider) error {
	return redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp), redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false))
}

// graphQLTracing is the gqlgen extension that makes a span of every operation.
type graphQLTracing struct{ tracer trace.Tracer }

var (
	_ graphql.HandlerExtension     = graphQLTracing{}
	_ graphql.OperationInterceptor = graphQLTracing{}
)

func (graphQLTracing) ExtensionName() string                   { return "Tracing" }
func (graphQLTracing) Validate(graphql.ExecutableSchema) error { return nil }

func (t graphQLTracing) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	typ, name := "unknown", oc.OperationName
	var fields []string
	if op := oc.Operation; op != nil {
		typ = string(op.Operation)
		if name == "" {
			name = op.Name
		}
		for _, sel := range op.SelectionSet {
			if f, ok := sel.(*ast.Field); ok {
				fields = append(fields, f.Name)
			}
		}
	}
	spanName := "graphql " + typ
	if name != "" {
		spanName += " " + name
	}
	ctx, span := t.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("graphql.operation.type", typ), attribute.String("graphql.operation.name", name),
		attribute.StringSlice("graphql.fields", fields)))
	h := next(ctx)
	if typ == string(ast.Subscription) {
		span.End() // its start only: events get no spans
		return h
	}
	ended := false
	return func(ctx context.Context) *graphql.Response {
		resp := h(trace.ContextWithSpan(ctx, span))
		if ended {
			return resp
		}
		if resp != nil && len(resp.Errors) > 0 {
			codesSeen := make([]string, 0, len(resp.Errors))
			for _, e := range resp.Errors {
				c, _ := e.Extensions["code"].(string)
				codesSeen = append(codesSeen, c)
			}
			span.SetAttributes(attribute.StringSlice("graphql.error_codes", codesSeen))
			span.SetStatus(codes.Error, codesSeen[0])
		}
		if resp == nil || resp.HasNext == nil || !*resp.HasNext {
			ended = true
			span.End()
		}
		return resp
	}
}
