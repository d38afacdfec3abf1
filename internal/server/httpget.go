package server

import (
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// getTransport answers GraphQL over GET (the request in the URL) as gqlgen's transport.GET (v0.17.98) does, the
// same bytes, Content-Type and statuses, but for a mutation: 405 Method Not Allowed with Allow: POST, as GraphQL
// over HTTP asks (gqlgen answered 406), and whatever carried its document, query text or a persisted query's
// hash. A subscription over a plain GET stays gqlgen's 406: its Accept does not take an event stream.
type getTransport struct{}

var _ graphql.Transport = getTransport{}

func (getTransport) Supports(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && r.Method == http.MethodGet
}

func (getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	contentType := gqlhttp.ResponseContentType(r.Header.Get("Accept"))
	w.Header().Set("Content-Type", contentType)
	start := graphql.Now()
	params, err := gqlhttp.URLParams(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeResponse(w, &graphql.Response{Errors: gqlerror.List{{Message: err.Error()}}})
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	rc, errs := exec.CreateOperationContext(r.Context(), params)
	if gqlhttp.IsMutation(rc) {
		gqlhttp.RefuseGETMutation(w)
		return
	}
	if errs != nil {
		status := http.StatusOK
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			status = http.StatusUnprocessableEntity
			if contentType == "application/graphql-response+json" {
				status = http.StatusBadRequest
			}
		}
		w.WriteHeader(status)
		writeResponse(w, exec.DispatchError(graphql.WithOperationContext(r.Context(), rc), errs))
		return
	}
	if rc.Operation.Operation != ast.Query {
		w.WriteHeader(http.StatusNotAcceptable)
		writeResponse(w, &graphql.Response{Errors: gqlerror.List{{Message: "GET requests only allow query operations"}}})
		return
	}
	responses, ctx := exec.DispatchOperation(r.Context(), rc)
	writeResponse(w, responses(ctx))
}

// writeResponse writes resp as gqlgen's transports do.
func writeResponse(w http.ResponseWriter, resp *graphql.Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err) // as gqlgen: the handler's recover answers it
	}
	w.Write(b)
}
