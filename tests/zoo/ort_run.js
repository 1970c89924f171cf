// Runs one model in ONNX Runtime (onnxruntime-node) on one .npy input and writes its first
// output as .npy: node ort_run.js MODEL.onnx INPUT_NAME IN.npy OUT.npy
// With OUT a folder (ending in '/'), writes every float32 output as OUT/NAME.npy, NAME the
// output's name with every character outside [A-Za-z0-9_.-] replaced by '_' (tools/zoo.py's
// check of intermediate tensors).
// ORT_NODE names the onnxruntime-node package directory (default /tmp/ort/node_modules/onnxruntime-node).
const fs = require('fs');
const ort = require(process.env.ORT_NODE || '/tmp/ort/node_modules/onnxruntime-node');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter(s => s.trim()).map(Number);
  const body = buf.subarray(10 + headerLen);
  const copy = new Uint8Array(body).buffer;
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(copy), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(copy), shape);
  throw new Error(path + ': unsupported dtype ' + descr);
}

function writeNpy(path, tensor) {
  if (tensor.type !== 'float32') throw new Error('output is ' + tensor.type + ', expected float32');
  const shape = '(' + tensor.dims.join(', ') + (tensor.dims.length === 1 ? ',)' : ')');
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ', }';
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

(async () => {
  const [model, inputName, inPath, outPath] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const result = await session.run({ [inputName]: readNpy(inPath) });
  if (!outPath.endsWith('/')) {
    writeNpy(outPath, result[session.outputNames[0]]);
    return;
  }
  fs.mkdirSync(outPath, { recursive: true });
  for (const name of session.outputNames) {
    if (result[name].type !== 'float32') continue;
    writeNpy(outPath + name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy', result[name]);
  }
})().catch(e => { console.error(e.message); process.exit(1); });
