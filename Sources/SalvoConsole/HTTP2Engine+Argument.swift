import ArgumentParser
import SalvoHTTP2

/// `--h2-engine wire|nio`, for `salvo send` and `salvo-bench h2`.
extension HTTP2Engine: ExpressibleByArgument {}
