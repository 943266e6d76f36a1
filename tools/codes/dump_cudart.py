import ctypes, sys, json
lib = ctypes.CDLL(sys.argv[1])
lib.cudaGetErrorString.restype = ctypes.c_char_p
lib.cudaGetErrorName.restype = ctypes.c_char_p
out=[]
for i in range(0, 11000):
    n = lib.cudaGetErrorName(i).decode()
    s = lib.cudaGetErrorString(i).decode()
    if n != "cudaErrorUnknown" or i==999:
        if "unrecognized" in s.lower() and i!=999: continue
        out.append((i,n,s))
for r in out: print(json.dumps(r))
