# The leaderboard server as a static, non-root image (the binary embeds the dashboard and the time zone database).
#   docker build -t leaderboard --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run -p 8080:8080 -e REDIS_URL=redis://redis:6379 -e API_KEYS=admin:... leaderboard
# The build line below is also what TestDockerfileBuild (server_test.go) runs, so the binary it makes is tested.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/leaderboard/leaderboard/internal/server.version=${VERSION} -X github.com/leaderboard/leaderboard/internal/server.revision=${REVISION}" -o /out/leaderboard .

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/leaderboard /leaderboard
USER 65532:65532
ENV LISTEN_ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=4s --start-period=5s CMD ["/leaderboard", "healthcheck"]
ENTRYPOINT ["/leaderboard"]
