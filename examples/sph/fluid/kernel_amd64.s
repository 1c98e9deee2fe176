//go:build !purego

#include "textflag.h"

// The vector kernels of kernel_amd64.go: filterScalar, kernelSumScalar and forceSumScalar
// (kernel.go) four candidates or neighbours at a time in the lanes of a Y register, with
// the same IEEE operations in the same order (no fused multiply-add, no reassociation; a
// product or a sum may have its two operands swapped, which gives the same bits), and
// every sum added lane after lane in index order. Go's assembler writes the operands of
// the three-operand instructions last to first: VSUBPD A, B, C is C = B - A.

// DIST and KEEP are filterScalar's work for four candidates, their indexes in X4 and their
// x, y and z in Y6, Y7 and Y8, with xi, yi, zi and H2 in Y0 to Y3. DIST leaves their r² in
// Y6 and r² - H2, whose sign bits are the neighbours, in Y7. KEEP stores the indexes and the
// r² of the neighbours to dst and r2 at DX (four of each, the neighbours first), advances DX
// past them, and the indexes in X4 by four (X5).
#define DIST \
	VSUBPD Y0, Y6, Y6 \
	VMULPD Y6, Y6, Y6 \
	VSUBPD Y1, Y7, Y7 \
	VMULPD Y7, Y7, Y7 \
	VADDPD Y7, Y6, Y6 \
	VSUBPD Y2, Y8, Y8 \
	VMULPD Y8, Y8, Y8 \
	VADDPD Y8, Y6, Y6 \
	VSUBPD Y3, Y6, Y7

#define KEEP \
	VMOVMSKPD Y7, R13 \
	POPCNTQ R13, AX \
	SHLQ $4, R13 \
	VPERMILPS (R11)(R13*1), X4, X8 \
	VMOVDQU X8, (DI)(DX*4) \
	VMOVDQU (R12)(R13*2), Y9 \
	VPERMPS Y6, Y9, Y10 \
	VMOVUPD Y10, (SI)(DX*8) \
	ADDQ AX, DX \
	VPADDD X5, X4, X4

// func filterAVX2(dst *int32, r2 *float64, spans *span, ns int, x, y, z *float64, xi, yi, zi, H2 float64) int
TEXT ·filterAVX2(SB), NOSPLIT, $0-96
	MOVQ dst+0(FP), DI
	MOVQ r2+8(FP), SI
	MOVQ spans+16(FP), R15
	MOVQ ns+24(FP), CX
	MOVQ x+32(FP), R8
	MOVQ y+40(FP), R9
	MOVQ z+48(FP), R10
	VBROADCASTSD xi+56(FP), Y0
	VBROADCASTSD yi+64(FP), Y1
	VBROADCASTSD zi+72(FP), Y2
	VBROADCASTSD H2+80(FP), Y3
	VMOVDQU four<>(SB), X5
	LEAQ permI<>(SB), R11
	LEAQ permD<>(SB), R12
	XORQ DX, DX // neighbours found

filterSpan:
	MOVLQSX 0(R15), BX // the next candidate
	MOVLQSX 4(R15), R14 // the span's end
	VMOVD BX, X4
	VPBROADCASTD X4, X4
	VPADDD iota<>(SB), X4, X4 // the indexes of the four candidates

filterFour:
	LEAQ 4(BX), R13
	CMPQ R13, R14
	JGT filterTail
	VMOVUPD (R8)(BX*8), Y6
	VMOVUPD (R9)(BX*8), Y7
	VMOVUPD (R10)(BX*8), Y8
	DIST
	KEEP
	ADDQ $4, BX
	JMP filterFour

filterTail:
	// The last one to three candidates, the other lanes masked out of the loads (which
	// then read nothing there) and out of the neighbours.
	MOVQ R14, R13
	SUBQ BX, R13
	JZ filterNext
	SHLQ $5, R13
	LEAQ lanes<>(SB), AX
	VMOVDQU (AX)(R13*1), Y11
	VMASKMOVPD (R8)(BX*8), Y11, Y6
	VMASKMOVPD (R9)(BX*8), Y11, Y7
	VMASKMOVPD (R10)(BX*8), Y11, Y8
	DIST
	VANDPD Y11, Y7, Y7
	KEEP

filterNext:
	ADDQ $8, R15
	DECQ CX
	JNZ filterSpan

	MOVQ DX, ret+88(FP)
	VZEROUPPER
	RET

// func kernelSumAVX2(r2, f *float64, n int, acc, hinv, sigma, sig4, c1, c2 float64) float64
TEXT ·kernelSumAVX2(SB), NOSPLIT, $0-80
	MOVQ r2+0(FP), SI
	MOVQ f+8(FP), DI
	MOVQ n+16(FP), CX
	VMOVSD acc+24(FP), X8
	VBROADCASTSD hinv+32(FP), Y9
	VBROADCASTSD sigma+40(FP), Y10
	VBROADCASTSD sig4+48(FP), Y11
	VBROADCASTSD c1+56(FP), Y12
	VBROADCASTSD c2+64(FP), Y13
	VMOVUPD two<>(SB), Y14
	VMOVUPD one<>(SB), Y15
	XORQ BX, BX

kernelLoop:
	VMOVUPD (SI)(BX*8), Y0
	VSQRTPD Y0, Y1 // r
	VMULPD Y9, Y1, Y0 // q = r * hinv
	VSUBPD Y0, Y14, Y2 // t = 2 - q

	// w0 = sigma * (1 + (q*q) * (0.75*q - 1.5))
	VMULPD Y0, Y0, Y3
	VMULPD c075<>(SB), Y0, Y4
	VSUBPD c15<>(SB), Y4, Y4
	VMULPD Y4, Y3, Y3
	VADDPD Y3, Y15, Y3
	VMULPD Y3, Y10, Y3

	// f0 = c1 * (2.25*q - 3)
	VMULPD c225<>(SB), Y0, Y4
	VSUBPD c3<>(SB), Y4, Y4
	VMULPD Y4, Y12, Y4

	// w1 = ((sig4*t)*t)*t
	VMULPD Y2, Y11, Y5
	VMULPD Y2, Y5, Y5
	VMULPD Y2, Y5, Y5

	// f1 = -((c2*t)*t) / r
	VMULPD Y2, Y13, Y6
	VMULPD Y2, Y6, Y6
	VXORPD sign<>(SB), Y6, Y6
	VDIVPD Y1, Y6, Y6

	// The pieces of q < 1, the others elsewhere.
	VCMPPD $1, Y15, Y0, Y7 // q < 1
	VBLENDVPD Y7, Y4, Y6, Y4
	VMOVUPD Y4, (DI)(BX*8)
	VBLENDVPD Y7, Y3, Y5, Y3

	// acc += w, lane after lane.
	VADDSD X3, X8, X8
	VPERMILPD $1, X3, X1
	VADDSD X1, X8, X8
	VEXTRACTF128 $1, Y3, X2
	VADDSD X2, X8, X8
	VPERMILPD $1, X2, X1
	VADDSD X1, X8, X8
	ADDQ $4, BX
	CMPQ BX, CX
	JLT kernelLoop

	VMOVSD X8, ret+72(FP)
	VZEROUPPER
	RET

// func forceSumAVX2(s *[3]float64, bi, bodies *body, nb *int32, fs *float64, n int, h, epsh2, m float64)
//
// A body is 64 bytes: x, y, z, vx, then vy, vz, rho, pt. The frame holds h, epsh2 and m in
// four lanes each.
TEXT ·forceSumAVX2(SB), NOSPLIT, $96-72
	MOVQ s+0(FP), DI
	MOVQ bi+8(FP), AX
	MOVQ bodies+16(FP), SI
	MOVQ nb+24(FP), R8
	MOVQ fs+32(FP), R9
	MOVQ n+40(FP), CX
	VBROADCASTSD h+48(FP), Y0
	VMOVUPD Y0, 0(SP)
	VBROADCASTSD epsh2+56(FP), Y0
	VMOVUPD Y0, 32(SP)
	VBROADCASTSD m+64(FP), Y0
	VMOVUPD Y0, 64(SP)
	VMOVUPD 0(AX), Y14 // x, y, z, vx of i
	VBROADCASTSD 32(AX), Y13 // vy
	VBROADCASTSD 40(AX), Y12 // vz
	VBROADCASTSD 48(AX), Y11 // rho
	VBROADCASTSD 56(AX), Y10 // pt
	VMOVUPD 0(DI), X15
	VMOVSD 16(DI), X0
	VINSERTF128 $1, X0, Y15, Y15 // s[0], s[1], s[2], 0
	XORQ BX, BX

forceLoop:
	MOVLQSX 0(R8)(BX*4), R10
	MOVLQSX 4(R8)(BX*4), R11
	MOVLQSX 8(R8)(BX*4), R12
	MOVLQSX 12(R8)(BX*4), R13
	SHLQ $6, R10
	SHLQ $6, R11
	SHLQ $6, R12
	SHLQ $6, R13
	ADDQ SI, R10
	ADDQ SI, R11
	ADDQ SI, R12
	ADDQ SI, R13

	// Each neighbour's dx, dy, dz and vx_i - vx_j, then transposed: a register each.
	VSUBPD 0(R10), Y14, Y0
	VSUBPD 0(R11), Y14, Y1
	VSUBPD 0(R12), Y14, Y2
	VSUBPD 0(R13), Y14, Y3
	VUNPCKLPD Y1, Y0, Y4
	VUNPCKHPD Y1, Y0, Y5
	VUNPCKLPD Y3, Y2, Y6
	VUNPCKHPD Y3, Y2, Y7
	VPERM2F128 $0x20, Y6, Y4, Y0 // dx
	VPERM2F128 $0x20, Y7, Y5, Y1 // dy
	VPERM2F128 $0x31, Y6, Y4, Y2 // dz
	VPERM2F128 $0x31, Y7, Y5, Y3 // vx_i - vx_j

	// The neighbours' vy, vz, rho and pt, transposed.
	VMOVUPD 32(R10), Y4
	VMOVUPD 32(R11), Y5
	VMOVUPD 32(R12), Y6
	VMOVUPD 32(R13), Y7
	VUNPCKLPD Y5, Y4, Y8
	VUNPCKHPD Y5, Y4, Y9
	VUNPCKLPD Y7, Y6, Y4
	VUNPCKHPD Y7, Y6, Y5
	VPERM2F128 $0x20, Y4, Y8, Y6 // vy
	VPERM2F128 $0x31, Y4, Y8, Y8 // rho
	VPERM2F128 $0x20, Y5, Y9, Y7 // vz
	VPERM2F128 $0x31, Y5, Y9, Y9 // pt

	// vdotr = (dvx*dx + dvy*dy) + dvz*dz
	VSUBPD Y6, Y13, Y6
	VSUBPD Y7, Y12, Y7
	VMULPD Y0, Y3, Y3
	VMULPD Y1, Y6, Y6
	VADDPD Y6, Y3, Y3
	VMULPD Y2, Y7, Y7
	VADDPD Y7, Y3, Y3

	// r2 = (dx*dx + dy*dy) + dz*dz
	VMULPD Y0, Y0, Y4
	VMULPD Y1, Y1, Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y2, Y2, Y5
	VADDPD Y5, Y4, Y4

	// mu = (h*vdotr) / (r2 + epsh2); visc = ((2mu)mu - mu) / (0.5(rho_i + rho_j)), kept
	// where vdotr < 0.
	VADDPD 32(SP), Y4, Y4
	VMULPD 0(SP), Y3, Y5
	VDIVPD Y4, Y5, Y5
	VMULPD two<>(SB), Y5, Y6
	VMULPD Y5, Y6, Y6
	VSUBPD Y5, Y6, Y6
	VADDPD Y8, Y11, Y8
	VMULPD half<>(SB), Y8, Y8
	VDIVPD Y8, Y6, Y6
	VXORPD Y7, Y7, Y7
	VCMPPD $1, Y7, Y3, Y7
	VANDPD Y7, Y6, Y6

	// g = (m * ((pt_i + pt_j) + visc)) * F
	VADDPD Y9, Y10, Y9
	VADDPD Y6, Y9, Y9
	VMULPD 64(SP), Y9, Y9
	VMULPD (R9)(BX*8), Y9, Y9

	// g*dx, g*dy, g*dz, transposed back to one register per neighbour (0 in the fourth
	// lane), added to s in neighbour order.
	VMULPD Y9, Y0, Y0
	VMULPD Y9, Y1, Y1
	VMULPD Y9, Y2, Y2
	VXORPD Y3, Y3, Y3
	VUNPCKLPD Y1, Y0, Y4
	VUNPCKHPD Y1, Y0, Y5
	VUNPCKLPD Y3, Y2, Y6
	VUNPCKHPD Y3, Y2, Y7
	VPERM2F128 $0x20, Y6, Y4, Y0
	VPERM2F128 $0x20, Y7, Y5, Y1
	VPERM2F128 $0x31, Y6, Y4, Y2
	VPERM2F128 $0x31, Y7, Y5, Y3
	VADDPD Y0, Y15, Y15
	VADDPD Y1, Y15, Y15
	VADDPD Y2, Y15, Y15
	VADDPD Y3, Y15, Y15
	ADDQ $4, BX
	CMPQ BX, CX
	JLT forceLoop

	VMOVUPD X15, 0(DI)
	VEXTRACTF128 $1, Y15, X0
	VMOVSD X0, 16(DI)
	VZEROUPPER
	RET

// Constants in four lanes.
DATA one<>+0(SB)/8, $0x3ff0000000000000 // 1.0
DATA one<>+8(SB)/8, $0x3ff0000000000000
DATA one<>+16(SB)/8, $0x3ff0000000000000
DATA one<>+24(SB)/8, $0x3ff0000000000000
GLOBL one<>(SB), RODATA|NOPTR, $32

DATA two<>+0(SB)/8, $0x4000000000000000 // 2.0
DATA two<>+8(SB)/8, $0x4000000000000000
DATA two<>+16(SB)/8, $0x4000000000000000
DATA two<>+24(SB)/8, $0x4000000000000000
GLOBL two<>(SB), RODATA|NOPTR, $32

DATA half<>+0(SB)/8, $0x3fe0000000000000 // 0.5
DATA half<>+8(SB)/8, $0x3fe0000000000000
DATA half<>+16(SB)/8, $0x3fe0000000000000
DATA half<>+24(SB)/8, $0x3fe0000000000000
GLOBL half<>(SB), RODATA|NOPTR, $32

DATA c075<>+0(SB)/8, $0x3fe8000000000000 // 0.75
DATA c075<>+8(SB)/8, $0x3fe8000000000000
DATA c075<>+16(SB)/8, $0x3fe8000000000000
DATA c075<>+24(SB)/8, $0x3fe8000000000000
GLOBL c075<>(SB), RODATA|NOPTR, $32

DATA c15<>+0(SB)/8, $0x3ff8000000000000 // 1.5
DATA c15<>+8(SB)/8, $0x3ff8000000000000
DATA c15<>+16(SB)/8, $0x3ff8000000000000
DATA c15<>+24(SB)/8, $0x3ff8000000000000
GLOBL c15<>(SB), RODATA|NOPTR, $32

DATA c225<>+0(SB)/8, $0x4002000000000000 // 2.25
DATA c225<>+8(SB)/8, $0x4002000000000000
DATA c225<>+16(SB)/8, $0x4002000000000000
DATA c225<>+24(SB)/8, $0x4002000000000000
GLOBL c225<>(SB), RODATA|NOPTR, $32

DATA c3<>+0(SB)/8, $0x4008000000000000 // 3.0
DATA c3<>+8(SB)/8, $0x4008000000000000
DATA c3<>+16(SB)/8, $0x4008000000000000
DATA c3<>+24(SB)/8, $0x4008000000000000
GLOBL c3<>(SB), RODATA|NOPTR, $32

DATA sign<>+0(SB)/8, $0x8000000000000000
DATA sign<>+8(SB)/8, $0x8000000000000000
DATA sign<>+16(SB)/8, $0x8000000000000000
DATA sign<>+24(SB)/8, $0x8000000000000000
GLOBL sign<>(SB), RODATA|NOPTR, $32

DATA iota<>+0(SB)/8, $0x0000000100000000
DATA iota<>+8(SB)/8, $0x0000000300000002
GLOBL iota<>(SB), RODATA|NOPTR, $16

DATA four<>+0(SB)/8, $0x0000000400000004
DATA four<>+8(SB)/8, $0x0000000400000004
GLOBL four<>(SB), RODATA|NOPTR, $16

// permI and permD pack to the front the lanes whose bit is set in a 4-bit mask, in order:
// entry m of permI holds their indexes (VPERMILPS, four int32), of permD their dword pairs
// (VPERMPS, four float64).
DATA permI<>+0(SB)/8, $0x0000000000000000
DATA permI<>+8(SB)/8, $0x0000000000000000
DATA permI<>+16(SB)/8, $0x0000000000000000
DATA permI<>+24(SB)/8, $0x0000000000000000
DATA permI<>+32(SB)/8, $0x0000000000000001
DATA permI<>+40(SB)/8, $0x0000000000000000
DATA permI<>+48(SB)/8, $0x0000000100000000
DATA permI<>+56(SB)/8, $0x0000000000000000
DATA permI<>+64(SB)/8, $0x0000000000000002
DATA permI<>+72(SB)/8, $0x0000000000000000
DATA permI<>+80(SB)/8, $0x0000000200000000
DATA permI<>+88(SB)/8, $0x0000000000000000
DATA permI<>+96(SB)/8, $0x0000000200000001
DATA permI<>+104(SB)/8, $0x0000000000000000
DATA permI<>+112(SB)/8, $0x0000000100000000
DATA permI<>+120(SB)/8, $0x0000000000000002
DATA permI<>+128(SB)/8, $0x0000000000000003
DATA permI<>+136(SB)/8, $0x0000000000000000
DATA permI<>+144(SB)/8, $0x0000000300000000
DATA permI<>+152(SB)/8, $0x0000000000000000
DATA permI<>+160(SB)/8, $0x0000000300000001
DATA permI<>+168(SB)/8, $0x0000000000000000
DATA permI<>+176(SB)/8, $0x0000000100000000
DATA permI<>+184(SB)/8, $0x0000000000000003
DATA permI<>+192(SB)/8, $0x0000000300000002
DATA permI<>+200(SB)/8, $0x0000000000000000
DATA permI<>+208(SB)/8, $0x0000000200000000
DATA permI<>+216(SB)/8, $0x0000000000000003
DATA permI<>+224(SB)/8, $0x0000000200000001
DATA permI<>+232(SB)/8, $0x0000000000000003
DATA permI<>+240(SB)/8, $0x0000000100000000
DATA permI<>+248(SB)/8, $0x0000000300000002
GLOBL permI<>(SB), RODATA|NOPTR, $256

DATA permD<>+0(SB)/8, $0x0000000000000000
DATA permD<>+8(SB)/8, $0x0000000000000000
DATA permD<>+16(SB)/8, $0x0000000000000000
DATA permD<>+24(SB)/8, $0x0000000000000000
DATA permD<>+32(SB)/8, $0x0000000100000000
DATA permD<>+40(SB)/8, $0x0000000000000000
DATA permD<>+48(SB)/8, $0x0000000000000000
DATA permD<>+56(SB)/8, $0x0000000000000000
DATA permD<>+64(SB)/8, $0x0000000300000002
DATA permD<>+72(SB)/8, $0x0000000000000000
DATA permD<>+80(SB)/8, $0x0000000000000000
DATA permD<>+88(SB)/8, $0x0000000000000000
DATA permD<>+96(SB)/8, $0x0000000100000000
DATA permD<>+104(SB)/8, $0x0000000300000002
DATA permD<>+112(SB)/8, $0x0000000000000000
DATA permD<>+120(SB)/8, $0x0000000000000000
DATA permD<>+128(SB)/8, $0x0000000500000004
DATA permD<>+136(SB)/8, $0x0000000000000000
DATA permD<>+144(SB)/8, $0x0000000000000000
DATA permD<>+152(SB)/8, $0x0000000000000000
DATA permD<>+160(SB)/8, $0x0000000100000000
DATA permD<>+168(SB)/8, $0x0000000500000004
DATA permD<>+176(SB)/8, $0x0000000000000000
DATA permD<>+184(SB)/8, $0x0000000000000000
DATA permD<>+192(SB)/8, $0x0000000300000002
DATA permD<>+200(SB)/8, $0x0000000500000004
DATA permD<>+208(SB)/8, $0x0000000000000000
DATA permD<>+216(SB)/8, $0x0000000000000000
DATA permD<>+224(SB)/8, $0x0000000100000000
DATA permD<>+232(SB)/8, $0x0000000300000002
DATA permD<>+240(SB)/8, $0x0000000500000004
DATA permD<>+248(SB)/8, $0x0000000000000000
DATA permD<>+256(SB)/8, $0x0000000700000006
DATA permD<>+264(SB)/8, $0x0000000000000000
DATA permD<>+272(SB)/8, $0x0000000000000000
DATA permD<>+280(SB)/8, $0x0000000000000000
DATA permD<>+288(SB)/8, $0x0000000100000000
DATA permD<>+296(SB)/8, $0x0000000700000006
DATA permD<>+304(SB)/8, $0x0000000000000000
DATA permD<>+312(SB)/8, $0x0000000000000000
DATA permD<>+320(SB)/8, $0x0000000300000002
DATA permD<>+328(SB)/8, $0x0000000700000006
DATA permD<>+336(SB)/8, $0x0000000000000000
DATA permD<>+344(SB)/8, $0x0000000000000000
DATA permD<>+352(SB)/8, $0x0000000100000000
DATA permD<>+360(SB)/8, $0x0000000300000002
DATA permD<>+368(SB)/8, $0x0000000700000006
DATA permD<>+376(SB)/8, $0x0000000000000000
DATA permD<>+384(SB)/8, $0x0000000500000004
DATA permD<>+392(SB)/8, $0x0000000700000006
DATA permD<>+400(SB)/8, $0x0000000000000000
DATA permD<>+408(SB)/8, $0x0000000000000000
DATA permD<>+416(SB)/8, $0x0000000100000000
DATA permD<>+424(SB)/8, $0x0000000500000004
DATA permD<>+432(SB)/8, $0x0000000700000006
DATA permD<>+440(SB)/8, $0x0000000000000000
DATA permD<>+448(SB)/8, $0x0000000300000002
DATA permD<>+456(SB)/8, $0x0000000500000004
DATA permD<>+464(SB)/8, $0x0000000700000006
DATA permD<>+472(SB)/8, $0x0000000000000000
DATA permD<>+480(SB)/8, $0x0000000100000000
DATA permD<>+488(SB)/8, $0x0000000300000002
DATA permD<>+496(SB)/8, $0x0000000500000004
DATA permD<>+504(SB)/8, $0x0000000700000006
GLOBL permD<>(SB), RODATA|NOPTR, $512

// Entry t of lanes masks the first t lanes of four.
DATA lanes<>+0(SB)/8, $0
DATA lanes<>+8(SB)/8, $0
DATA lanes<>+16(SB)/8, $0
DATA lanes<>+24(SB)/8, $0
DATA lanes<>+32(SB)/8, $-1
DATA lanes<>+40(SB)/8, $0
DATA lanes<>+48(SB)/8, $0
DATA lanes<>+56(SB)/8, $0
DATA lanes<>+64(SB)/8, $-1
DATA lanes<>+72(SB)/8, $-1
DATA lanes<>+80(SB)/8, $0
DATA lanes<>+88(SB)/8, $0
DATA lanes<>+96(SB)/8, $-1
DATA lanes<>+104(SB)/8, $-1
DATA lanes<>+112(SB)/8, $-1
DATA lanes<>+120(SB)/8, $0
GLOBL lanes<>(SB), RODATA|NOPTR, $128
