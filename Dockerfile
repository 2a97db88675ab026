# The rtfshost image: built from this repository with the Go toolchain
# alone (docs/deploy.md). The runtime stage is Debian so that :exec and
# :stdio streams find a shell and the programs an operator installs.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/rtfshost ./cmd/rtfshost

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/rtfshost --create-home rtfshost
COPY --from=build /out/rtfshost /usr/local/bin/rtfshost
USER rtfshost
WORKDIR /var/lib/rtfshost
VOLUME /var/lib/rtfshost
EXPOSE 7070
# A token is required on any address but loopback: pass RTFSHOST_TOKEN.
ENTRYPOINT ["/usr/local/bin/rtfshost"]
CMD ["serve", "--listen", "0.0.0.0:7070", "--data", "/var/lib/rtfshost"]
