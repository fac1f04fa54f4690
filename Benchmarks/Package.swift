// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the root build stays lean: `cd Benchmarks && swift package benchmark`.
let package = Package(
    name: "SalvoBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Salvo", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "WireBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "APNSWire", package: "Salvo"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/WireBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "PipelineBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "APNSWire", package: "Salvo"),
                .product(name: "SalvoRows", package: "Salvo"), .product(name: "SalvoBinary", package: "Salvo"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/PipelineBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
