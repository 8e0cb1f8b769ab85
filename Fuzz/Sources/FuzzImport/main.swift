import FuzzSupport
import PinConfig
import PinAppFormats

/// Any bytes as an Android network security config: reading must end in a
/// document or an error; a document's rules, written as YAML, must read back
/// through the configuration parser without a single error, so nothing from
/// the input can break out of a quoted value or a comment.
func fuzzImport(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let document = try? XMLReader.parse(bytes),
    let imported = try? AndroidImporter.translate(document, input: "fuzz.xml")
  else { return 0 }
  let yaml = YAMLWriter.write(imported)
  let (configuration, errors) = ConfigurationParser.parseCollecting(yaml, file: "imported.yaml")
  require(errors.isEmpty, "imported YAML does not parse: \(errors.map(\.description))\n\(yaml)")
  require(configuration?.domains.count == imported.rules.count, "rules lost or added")
  return 0
}

@_cdecl("FuzzImport_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzImport(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzImport(data, size) }
