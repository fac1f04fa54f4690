import CLibFuzzer

#if canImport(Glibc)
import Glibc
#endif

// libFuzzer runs `fuzzHTTP2Answers` on every input (see CLibFuzzer.h for why the driver is called from here).
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzHTTP2Answers))
