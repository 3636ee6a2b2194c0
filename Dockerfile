# The stipend image: a static binary on a distroless base, running as a
# non-root user. `gcloud run deploy --source .` builds this file (Cloud Run
# uses a Dockerfile when the source has one); so does
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t stipend .
#
# VERSION is what `stipend version` and the "listening" log line report;
# without it the binary reports "(devel)".

FROM golang:1.26 AS build
WORKDIR /src
# The module download is its own layer: it is rebuilt only when go.mod or
# go.sum change, not on every source change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# CGO_ENABLED=0: a static binary that needs no libc, as the base has none.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.Version=${VERSION}" -o /out/stipend ./cmd/stipend

# CA certificates (for Firestore and JWKS URLs), tzdata, a nonroot user
# (65532) and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stipend /stipend
# Stipend listens on :$PORT when neither --addr nor STIPEND_ADDR is set.
# Cloud Run sets PORT itself; this default serves `docker run -p 8080:8080`.
ENV PORT=8080
EXPOSE 8080
USER nonroot:nonroot
# The binary is PID 1 and receives SIGTERM itself (exec form). The command
# defaults to serve; `docker run IMAGE keys api --role host` runs another.
ENTRYPOINT ["/stipend"]
CMD ["serve"]
