// Runs one ONNX model on ONNX Runtime for Node (the reference for kiln's opset 18-21 tests).
// usage: node ort_reference.js MODULE_DIR model.onnx io.json
// io.json holds {"inputs": {name: {"type": "float32", "dims": [..], "data": base64}}}; the
// outputs are written back into it as {"outputs": [{"name", "type", "dims", "data"}]}.
const fs = require('fs');
const ort = require(process.argv[2] + '/node_modules/onnxruntime-node');

const kArrays = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
};

async function main() {
  const [modelPath, ioPath] = process.argv.slice(3);
  const io = JSON.parse(fs.readFileSync(ioPath));
  const session = await ort.InferenceSession.create(modelPath, {graphOptimizationLevel: 'disabled'});
  const feeds = {};
  for (const [name, t] of Object.entries(io.inputs)) {
    const bytes = Buffer.from(t.data, 'base64');
    const Arr = kArrays[t.type];
    const copy = new Uint8Array(bytes);  // aligned copy
    feeds[name] = new ort.Tensor(t.type, new Arr(copy.buffer, 0, copy.byteLength / Arr.BYTES_PER_ELEMENT), t.dims);
  }
  const results = await session.run(feeds);
  io.outputs = session.outputNames.map((name) => {
    const t = results[name];
    const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    return {name, type: t.type, dims: t.dims, data: data.toString('base64')};
  });
  fs.writeFileSync(ioPath, JSON.stringify(io));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
