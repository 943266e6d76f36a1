# Run from a clone of NVIDIA/nccl: lists the release tags whose src/ contains each nccl-lines pattern.
# Needs /tmp/tags.txt = `git tag | grep -E '^v2\.[0-9]+\.[0-9]+-1$' | sort -V`
import subprocess,sys,json
sys.path.insert(0,'/work/staging/codes/tools')
from data_nccl_lines import LINES
SRC={"Cuda failure 'out of memory'":"Cuda failure '%s'","Cuda failure 2 'out of memory'":"Cuda failure %d '%s'",
     "Call to connect returned Connection refused, retrying":"Call to connect returned %s, retrying","Call to ibv_reg_mr":"ibv_reg_mr",
     "Error while creating shared memory segment":"Error while %s shared memory segment",
     "Error while attaching to shared memory segment":"Error while %s shared memory segment","invalid root":"invalid root %d",
     "Message truncated : received":"Message truncated : received"}
pats=[l["pattern"] for l in LINES]
tags=[t.strip() for t in open('/tmp/tags.txt')]
res={p:[] for p in pats}
for t in tags:
    args=["git","grep","-h","-F"]
    for p in pats: args+=["-e",SRC.get(p,p)]
    out=subprocess.run(args+[t,"--","src"],capture_output=True,text=True)
    if out.returncode not in (0,1): print("ERR",t,out.stderr[:200])
    out=out.stdout
    for p in pats:
        if SRC.get(p,p) in out: res[p].append(t[1:-2])
json.dump(res,open('/work/staging/codes/evidence/nccl_line_versions.json','w'),indent=1)
for p in pats:
    ts=res[p]; print(f"{p!r}: {len(ts)}: {ts[0] if ts else None} .. {ts[-1] if ts else None}")
