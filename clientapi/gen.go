package clientapi

// Regenerate with Debian's protoc 3.21.12, protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2 on PATH (see the README).
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative clientapi.proto
