// GraphiQL on this server's own /graphql: queries and mutations over HTTP, subscriptions over graphql-ws on the
// same origin. The editors' state lives in the URL (?query=&variables=&operationName=), so links (the dashboard's)
// open with an operation filled in. An API key may be given in the URL fragment (#key=lb_...): a fragment never
// leaves the browser, and the page sends the key itself, as the Authorization header and in the websocket's
// connection_init; the server never writes a key into this page.
(function () {
  const params = Object.fromEntries(new URLSearchParams(location.search));
  const key = new URLSearchParams(location.hash.slice(1)).get('key');
  const auth = key ? 'Bearer ' + key : '';
  const url = location.origin + '/graphql';
  const subscriptionUrl = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/graphql';
  const fetcher = GraphiQL.createFetcher({
    url,
    subscriptionUrl,
    wsConnectionParams: auth ? { authorization: auth } : {},
  });

  function updateURL() {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v) search.set(k, v);
    }
    history.replaceState(null, '', '?' + search.toString() + location.hash);
  }
  const edit = (name) => (value) => { params[name] = value; updateURL(); };

  ReactDOM.render(
    React.createElement(GraphiQL, {
      fetcher,
      query: params.query,
      variables: params.variables,
      operationName: params.operationName,
      headers: params.headers ?? (auth ? JSON.stringify({ Authorization: auth }, null, 2) : undefined),
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
      onEditQuery: edit('query'),
      onEditVariables: edit('variables'),
      onEditOperationName: edit('operationName'),
    }),
    document.getElementById('graphiql'),
  );
})();
