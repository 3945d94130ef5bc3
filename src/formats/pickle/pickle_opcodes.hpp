// Pickle opcode bytes and names, from the Python pickle protocol specification
// (Lib/pickletools.py, protocols 0 to 5).
#pragma once

#include <cstdint>
#include <string_view>

namespace coopsim::pickle::op {

// Protocol 0 and 1.
inline constexpr unsigned char kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2';
inline constexpr unsigned char kFloat = 'F', kInt = 'I', kBinInt = 'J', kBinInt1 = 'K', kLong = 'L';
inline constexpr unsigned char kBinInt2 = 'M', kNone = 'N', kPersId = 'P', kBinPersId = 'Q';
inline constexpr unsigned char kReduce = 'R', kString = 'S', kBinString = 'T', kShortBinString = 'U';
inline constexpr unsigned char kUnicode = 'V', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b';
inline constexpr unsigned char kGlobal = 'c', kDict = 'd', kEmptyDict = '}', kAppends = 'e';
inline constexpr unsigned char kGet = 'g', kBinGet = 'h', kInst = 'i', kLongBinGet = 'j', kList = 'l';
inline constexpr unsigned char kEmptyList = ']', kObj = 'o', kPut = 'p', kBinPut = 'q';
inline constexpr unsigned char kLongBinPut = 'r', kSetItem = 's', kTuple = 't', kEmptyTuple = ')';
inline constexpr unsigned char kSetItems = 'u', kBinFloat = 'G';
// Protocol 2.
inline constexpr unsigned char kProto = 0x80, kNewObj = 0x81, kExt1 = 0x82, kExt2 = 0x83, kExt4 = 0x84;
inline constexpr unsigned char kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88;
inline constexpr unsigned char kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b;
// Protocol 3.
inline constexpr unsigned char kBinBytes = 'B', kShortBinBytes = 'C';
// Protocol 4.
inline constexpr unsigned char kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e;
inline constexpr unsigned char kEmptySet = 0x8f, kAddItems = 0x90, kFrozenSet = 0x91, kNewObjEx = 0x92;
inline constexpr unsigned char kStackGlobal = 0x93, kMemoize = 0x94, kFrame = 0x95;
// Protocol 5.
inline constexpr unsigned char kByteArray8 = 0x96, kNextBuffer = 0x97, kReadonlyBuffer = 0x98;

// The opcode's name in the specification, or "" for a byte that is no opcode.
constexpr std::string_view name(unsigned char code) {
  switch (code) {
    case kMark: return "MARK";
    case kStop: return "STOP";
    case kPop: return "POP";
    case kPopMark: return "POP_MARK";
    case kDup: return "DUP";
    case kFloat: return "FLOAT";
    case kInt: return "INT";
    case kBinInt: return "BININT";
    case kBinInt1: return "BININT1";
    case kLong: return "LONG";
    case kBinInt2: return "BININT2";
    case kNone: return "NONE";
    case kPersId: return "PERSID";
    case kBinPersId: return "BINPERSID";
    case kReduce: return "REDUCE";
    case kString: return "STRING";
    case kBinString: return "BINSTRING";
    case kShortBinString: return "SHORT_BINSTRING";
    case kUnicode: return "UNICODE";
    case kBinUnicode: return "BINUNICODE";
    case kAppend: return "APPEND";
    case kBuild: return "BUILD";
    case kGlobal: return "GLOBAL";
    case kDict: return "DICT";
    case kEmptyDict: return "EMPTY_DICT";
    case kAppends: return "APPENDS";
    case kGet: return "GET";
    case kBinGet: return "BINGET";
    case kInst: return "INST";
    case kLongBinGet: return "LONG_BINGET";
    case kList: return "LIST";
    case kEmptyList: return "EMPTY_LIST";
    case kObj: return "OBJ";
    case kPut: return "PUT";
    case kBinPut: return "BINPUT";
    case kLongBinPut: return "LONG_BINPUT";
    case kSetItem: return "SETITEM";
    case kTuple: return "TUPLE";
    case kEmptyTuple: return "EMPTY_TUPLE";
    case kSetItems: return "SETITEMS";
    case kBinFloat: return "BINFLOAT";
    case kProto: return "PROTO";
    case kNewObj: return "NEWOBJ";
    case kExt1: return "EXT1";
    case kExt2: return "EXT2";
    case kExt4: return "EXT4";
    case kTuple1: return "TUPLE1";
    case kTuple2: return "TUPLE2";
    case kTuple3: return "TUPLE3";
    case kNewTrue: return "NEWTRUE";
    case kNewFalse: return "NEWFALSE";
    case kLong1: return "LONG1";
    case kLong4: return "LONG4";
    case kBinBytes: return "BINBYTES";
    case kShortBinBytes: return "SHORT_BINBYTES";
    case kShortBinUnicode: return "SHORT_BINUNICODE";
    case kBinUnicode8: return "BINUNICODE8";
    case kBinBytes8: return "BINBYTES8";
    case kEmptySet: return "EMPTY_SET";
    case kAddItems: return "ADDITEMS";
    case kFrozenSet: return "FROZENSET";
    case kNewObjEx: return "NEWOBJ_EX";
    case kStackGlobal: return "STACK_GLOBAL";
    case kMemoize: return "MEMOIZE";
    case kFrame: return "FRAME";
    case kByteArray8: return "BYTEARRAY8";
    case kNextBuffer: return "NEXT_BUFFER";
    case kReadonlyBuffer: return "READONLY_BUFFER";
    default: return "";
  }
}

}  // namespace coopsim::pickle::op
